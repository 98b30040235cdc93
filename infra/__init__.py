"""CDK stacks and constructs that deploy Interlock."""
