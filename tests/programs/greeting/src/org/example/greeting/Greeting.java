// The tiny library the packages tests resolve from a Maven repository on the local disk
// (tests/programs/greeting/README.md): a class the driver calls through py4j and the executors
// through SQL's `reflect`.
package org.example.greeting;

public final class Greeting {
    private Greeting() {}

    public static String greet(String who) {
        return "hello " + who + " from greeting 1.0.0";
    }
}
