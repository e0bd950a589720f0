// Package house holds the checks of the project's shape that no one package can make
// about itself, such as the size of its interfaces. It has no code of its own.
package house
