package dataplane

// earliestRunAt is 2001-01-01T00:00:00Z in Unix ms, a limit no config can
// widen: a due time before it is almost surely seconds passed as
// milliseconds.
const earliestRunAt = 978307200000
