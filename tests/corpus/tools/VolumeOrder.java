// Asks a Spark release's own KubernetesVolumeUtils.parseVolumesWithPrefix for the order of the
// driver volumes of each configuration read from stdin, to check the builder's model of the
// Scala collections behind it (see scripts/volume_order.py). Reflection only, so one class file
// runs against every release:
//   javac -d /tmp/vo tests/corpus/tools/VolumeOrder.java
//   java -cp "/tmp/vo:$SPARK_HOME/jars/*" VolumeOrder < configs.txt
// Input: configurations separated by blank lines, one `key=value` per line, set into a
// SparkConf in that order. Output: one line per configuration, the volume names in Spark's
// order joined by `,`, or `!` and the exception's class when Spark refuses the configuration.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;

public class VolumeOrder {
    public static void main(String[] args) throws Exception {
        Class<?> confClass = Class.forName("org.apache.spark.SparkConf");
        Method set = confClass.getMethod("set", String.class, String.class);
        Class<?> utilsClass = Class.forName("org.apache.spark.deploy.k8s.KubernetesVolumeUtils$");
        Object utils = utilsClass.getField("MODULE$").get(null);
        Method parse = utilsClass.getMethod("parseVolumesWithPrefix", confClass, String.class);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        List<String> block = new ArrayList<>();
        String line;
        StringBuilder out = new StringBuilder();
        while (true) {
            line = in.readLine();
            if (line == null || line.isEmpty()) {
                if (!block.isEmpty()) {
                    out.append(order(confClass, set, utils, parse, block)).append('\n');
                    block.clear();
                }
                if (line == null) break;
                continue;
            }
            block.add(line);
        }
        System.out.print(out);
    }

    private static String order(Class<?> confClass, Method set, Object utils, Method parse, List<String> lines)
            throws Exception {
        Object conf = confClass.getConstructor(boolean.class).newInstance(false);
        for (String l : lines) {
            int eq = l.indexOf('=');
            set.invoke(conf, l.substring(0, eq), l.substring(eq + 1));
        }
        Object specs;
        try {
            specs = parse.invoke(utils, conf, "spark.kubernetes.driver.volumes.");
        } catch (java.lang.reflect.InvocationTargetException e) {
            return "!" + e.getCause().getClass().getSimpleName();
        }
        Iterator<?> it = asJava(specs);
        StringBuilder names = new StringBuilder();
        while (it.hasNext()) {
            Object spec = it.next();
            if (names.length() > 0) names.append(',');
            names.append(spec.getClass().getMethod("volumeName").invoke(spec));
        }
        return names.toString();
    }

    /** A Scala Seq's iterator, seen through its `hasNext`/`next` methods. */
    private static Iterator<?> asJava(Object seq) throws Exception {
        Object scalaIt = seq.getClass().getMethod("iterator").invoke(seq);
        Method hasNext = scalaIt.getClass().getMethod("hasNext");
        Method next = scalaIt.getClass().getMethod("next");
        hasNext.setAccessible(true);
        next.setAccessible(true);
        return new Iterator<Object>() {
            public boolean hasNext() {
                try { return (Boolean) hasNext.invoke(scalaIt); } catch (Exception e) { throw new RuntimeException(e); }
            }
            public Object next() {
                try { return next.invoke(scalaIt); } catch (Exception e) { throw new RuntimeException(e); }
            }
        };
    }
}
