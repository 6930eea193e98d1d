"""One module per scenario, each with ``async def run(seed, tick) -> Result``."""
