"""Agent jobs: budgets assigned by the server that nest, end terminally, and can be cancelled."""
