"""Archive search: ranking, hostile input and isolation, index sync, embeddings (one file each)."""
