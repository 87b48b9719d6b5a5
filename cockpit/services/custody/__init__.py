"""Custody of results: the remote manifest, the verified pull, safe loading, the teardown plan,
its executor and the audit log, and the flow that ties them to the gate (`flow.Custody`).

Uses the transport (`cockpit.services.transport.remote`, `ssh`) and the config loaders; nothing below
imports it back.
"""
