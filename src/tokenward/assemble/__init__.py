"""Building the parts a gateway is made of from its config: the identity parts (key store, key service, authenticator, the admin API) and the enforcement controls with the abuse engine."""
