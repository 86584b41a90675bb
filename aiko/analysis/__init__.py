"""After a run: replay a log on the simulator, compare two logs, plot them, write the run report."""
