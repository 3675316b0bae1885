"""Session simulation: the provider prefix-cache simulator (`cachesim`), prices (`pricing`), and
whole-session what-if and cost (`simulate`)."""
