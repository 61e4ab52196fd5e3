"""Planning: model specs, the GPU catalog, the memory / KV-cache calculator, the deployment
planner and capacity arithmetic. Pure functions over data in ``assets/``."""
