// Package iocount counts the bytes that pass through a writer: the one
// home of the counting writer that the developer API (the bytes of a
// stored result stream a request read), the report package (the bytes a
// streamed comparison wrote) and the engine (a value's encoded size)
// each kept a copy of.
//
// It imports only the standard library.
package iocount
