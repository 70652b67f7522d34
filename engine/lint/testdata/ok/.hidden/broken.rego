this is not rego
