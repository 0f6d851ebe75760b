"""One forward pass: its batch shape, its ops, their time on a GPU, and the memory it needs."""
