"""Operating a deployed stage: tenants (API Gateway usage plans) and their API keys (the keys table
plus API Gateway keys). Runs on an operator's machine with AWS credentials; never deployed."""
