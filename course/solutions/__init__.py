"""The answers, apart from the learner's files. The checker reads them only when told: `python -m course check N
--from solutions` (the CI test does, to show that every check can pass)."""
