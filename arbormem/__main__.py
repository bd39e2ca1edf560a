"""``python -m arbormem`` runs the CLI."""

from arbormem.cli import main

main()
