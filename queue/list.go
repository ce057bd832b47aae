package queue

import (
	_ "embed"
)

// Page is one page of a topic's jobs in one state.
type Page struct {
	Total int64      // jobs in that state in all
	Jobs  []*JobInfo // this page, in order
}

// MaxPage is the largest page List returns.
const MaxPage = 1000
