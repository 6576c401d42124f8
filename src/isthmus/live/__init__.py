"""The live side: the engine driven by the wall clock, with real pilots and a database."""
