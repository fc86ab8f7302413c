"""CrossGuard policy pack for speech-endpoints.

``policy/__main__.py`` serves the pack (what ``pulumi preview --policy-pack policy`` starts);
``python -m policy check`` runs the program under Pulumi's mocks and sends every resource to
that same pack process over the analyzer protocol (:mod:`policy.harness`).
"""
