package dataplane
