"""`rehearse`: the upgrade on a copy of the target (`rehearsal`), with what the run really
wrote (`written`)."""
