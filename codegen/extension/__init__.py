"""Stages 5 and 6: compile the generated sources into a robot module, self-check it, publish it."""
