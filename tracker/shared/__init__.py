"""Values and pure helpers every stage and door may import: the frozen values passed between stages,
the estimate's values, the one error tree, bounded parsing of upstream text, the artifact kinds and
the one-line problem formatter. Nothing here touches the network, the store, the clock or logs."""
