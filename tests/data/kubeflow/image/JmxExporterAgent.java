// A stand-in for the Prometheus JMX exporter's Java agent (jmx_prometheus_javaagent-*.jar), which
// kubeflow's spark-pi-prometheus example expects in its image. The JVM refuses to start when a
// -javaagent jar is missing; this one starts, says what it was given, and does nothing else.
package kubesim.standin;

import java.lang.instrument.Instrumentation;
import java.nio.file.Files;
import java.nio.file.Path;

public final class JmxExporterAgent {
    public static void premain(String args, Instrumentation instrumentation) {
        String arguments = args == null ? "" : args;
        // `<port>:<config file>` (or `<host>:<port>:<config file>`), as the exporter reads it.
        int colon = arguments.lastIndexOf(':');
        String config = colon < 0 ? "" : arguments.substring(colon + 1);
        boolean readable = !config.isEmpty() && Files.isReadable(Path.of(config));
        System.out.println("jmx exporter stand-in: args=" + arguments + " config-readable=" + readable);
    }
}
