"""Tests of minitensor/functions/."""
