"""Draft-and-verify rounds: acceptance, trees, drafter cost, speedup and the recommendation."""
