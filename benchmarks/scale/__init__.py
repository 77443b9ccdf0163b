"""Scale: the index engines at millions of entries, Redis, sharded Redis, Spark, the disk store."""
