"""Serving: the live vLLM engine and what it needs (managed processes, the prepared model,
start-up footprint, environment check, the GPU banner). "Engine" in this package always means
the vLLM engine process."""
