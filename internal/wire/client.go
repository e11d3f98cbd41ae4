package wire

import "reflect"

// CheckClient rejects a nil client, and a typed nil one: a nil pointer,
// map, func, channel or slice in a non-nil interface passes a
// "client == nil" test only to panic on first use, often on a library
// goroutine where the caller cannot recover it. Every constructor that
// takes a client calls it first; param names the parameter in the error.
func CheckClient(op, param string, client any) error {
	if client == nil {
		return Invalid(op, param, "must not be nil")
	}
	switch v := reflect.ValueOf(client); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface, reflect.UnsafePointer:
		if v.IsNil() {
			return Invalid(op, param, "must not be a nil %T", client)
		}
	}
	return nil
}
