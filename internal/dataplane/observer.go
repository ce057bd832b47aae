package dataplane

var (
	_ Observer        = NopObserver{}
	_ EnqueueObserver = NopObserver{}
)
