"""``speech-deploy``'s commands (``speech/__main__.py``): each parses its arguments, calls one
function of :mod:`speech.infra` and renders the result, so the Pulumi program's package holds no
command-line code (an import-linter contract in pyproject.toml)."""
