"""The polling daemon: the scheduler that shares repos among workers by lease, and the Hub's rate
budget that every worker draws on through the database."""
