"""Thematiq's job platform: everything the Function triggers call into.

The trigger modules in ``blueprints/`` only parse input and format output; the
logic that touches Table, Queue and Blob Storage lives here, one concept per
module.
"""
