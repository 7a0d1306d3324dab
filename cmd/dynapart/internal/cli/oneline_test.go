package cli

import "fmt"

func ExampleOneLine() {
	fmt.Println(OneLine("exit status 65"))
	fmt.Println(OneLine("line one\nline two\ttabbed"))
	fmt.Println(OneLine(`"quoted" at its start`))
	fmt.Println(OneLine("bad byte \xff"))
	// Output:
	// exit status 65
	// "line one\nline two\ttabbed"
	// "\"quoted\" at its start"
	// "bad byte \xff"
}
