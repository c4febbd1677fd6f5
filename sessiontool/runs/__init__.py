"""The run engine: run records, the detached worker, submitting and waiting, runners."""
