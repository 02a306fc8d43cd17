"""The checks, one module per rung: `EXERCISES`, a list of runner.Exercise, each judging the learner's module."""
