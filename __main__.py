"""speech-endpoints: measured autoscaling for speech endpoints (see speech/program.py)."""

from speech.program import main

main()
