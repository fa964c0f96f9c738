// Replaced by the informer implementation.
