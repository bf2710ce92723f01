from memgraph.cli import run

run()
