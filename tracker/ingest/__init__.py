"""The snapshots stage: new revisions of watched repos from their source into the store, every file
checked against what the revision's tree says it is."""
