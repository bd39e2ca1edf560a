"""Getting messages in: checking them, reading conversation files, and moving
whole stores in and out.

:mod:`~arbormem.ingest.validate` checks and normalises each incoming message;
:mod:`~arbormem.ingest.formats` reads the conversation files ``arbormem ingest``
accepts; :mod:`~arbormem.ingest.transfer` defines the export format and plans an
import.
"""
