"""Teams: who uses which repo and how (`profile`, the watchlist's `teams:` block), whether an
advisory affects them and why (`impact`, pure), the store's facts it needs (`facts`), and a
profile drafted from a code scan (`draft`)."""
