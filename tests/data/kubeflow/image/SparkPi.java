// A stand-in for Spark's `org.apache.spark.examples.SparkPi` (spark-examples.jar), which the Spark
// image has and pyspark's distribution lacks; the examples test compiles it against pyspark's
// jars. Like Spark's, it estimates pi over the number of slices its first argument names and
// prints "Pi is roughly ..."; unlike Spark's, it caps the slices at MAX_SLICES, so examples that
// ask for 100,000 tasks finish in seconds on a test machine.
package org.apache.spark.examples;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;

import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;

public final class SparkPi {
    static final int MAX_SLICES = 4;
    static final int SAMPLES_PER_SLICE = 100_000;

    public static void main(String[] args) {
        int asked = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        int slices = Math.max(1, Math.min(asked, MAX_SLICES));
        JavaSparkContext sc = new JavaSparkContext(new SparkConf().setAppName("Spark Pi"));
        List<Integer> seeds = new ArrayList<>();
        for (int i = 0; i < slices; i++) {
            seeds.add(i);
        }
        long hits = sc.parallelize(seeds, slices).map(seed -> {
            ThreadLocalRandom random = ThreadLocalRandom.current();
            long inside = 0;
            for (int i = 0; i < SAMPLES_PER_SLICE; i++) {
                double x = random.nextDouble() * 2 - 1;
                double y = random.nextDouble() * 2 - 1;
                if (x * x + y * y <= 1) {
                    inside++;
                }
            }
            return inside;
        }).reduce(Long::sum);
        long samples = (long) slices * SAMPLES_PER_SLICE;
        System.out.println("Pi is roughly " + 4.0 * hits / samples
            + " (slices asked " + asked + ", run " + slices + ")");
        sc.stop();
    }
}
