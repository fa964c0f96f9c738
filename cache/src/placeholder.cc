// Replaced by the cache implementation.
