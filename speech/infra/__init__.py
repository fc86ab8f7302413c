"""The Pulumi edge: the program (one component per model), its components, the stack config reader,
the offline preview under Pulumi's mocks and the rehearsal of the weight-cache build."""
