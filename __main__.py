"""speech-endpoints: measured autoscaling for speech endpoints (see speech/infra/program.py)."""

from speech.infra.program import main

main()
