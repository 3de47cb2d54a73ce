"""svc: the partner command line for the sandbox (listen, trigger, verify); see docs/sandbox.md."""
