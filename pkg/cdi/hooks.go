package cdi

// Hook is an OCI hook to run for every container that gets a device of the
// spec. Env is always emitted explicitly, even when empty, so a hook never
// inherits an environment shaped by the image.
type Hook struct {
	// Stage is the OCI hook name, e.g. "createContainer".
	Stage string
	Path  string
	// Args is the whole argv, Args[0] being the program name.
	Args []string
	Env  []string
}
