// Writes tests/unit/hlog/java_2.1.11.hlog with the REAL HdrHistogram Java
// library (Debian's libhdrhistogram-java 2.1.11) and, to stdout, what each
// interval holds as HdrHistogram reports it: per line "TAG START LENGTH
// TOTAL" then "VALUE COUNT" pairs, VALUE the bucket's highest equivalent
// value (recordedValues().getValueIteratedTo()). Also java_2.1.11_uniform.hlog
// (the second argument): 3 significant digits, ns up to an hour (jHiccup's
// and wrk2's settings) in every interval, one tagged "warmup", for
// perld_it_import_hlog (HistogramLogProcessor merges intervals into its
// first interval's layout, so only a uniform log's percentiles compare
// value for value). Regenerate (needs a JDK, for `java FILE.java`):
//
//   cd tests/unit/hlog && java -cp /usr/share/java/hdrhistogram.jar HlogFixture.java \
//       java_2.1.11.hlog java_2.1.11_uniform.hlog > java_2.1.11.expected
import java.io.File;
import java.util.Random;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramIterationValue;
import org.HdrHistogram.HistogramLogWriter;

public class HlogFixture {
  static void dump(String tag, double start, double length, Histogram h) {
    System.out.println("interval " + (tag == null ? "-" : tag) + " " + start + " " + length + " "
                       + h.getTotalCount());
    for (HistogramIterationValue v : h.recordedValues()) {
      System.out.println(v.getValueIteratedTo() + " " + v.getCountAtValueIteratedTo());
    }
  }

  public static void main(String[] args) throws Exception {
    final long startMs = 1700000000123L;
    HistogramLogWriter w = new HistogramLogWriter(new File(args[0]));
    w.outputComment("written by tests/unit/hlog/HlogFixture.java (HdrHistogram 2.1.11)");
    w.outputLogFormatVersion();
    w.outputStartTime(startMs);
    w.setBaseTime(startMs);
    w.outputBaseTime(startMs);
    w.outputLegend();
    Random r = new Random(29);
    Histogram[] hs = {
        new Histogram(1, 3_600_000_000_000L, 3),  // 3 digits, ns, hour range
        new Histogram(5),                         // 5 digits, auto-resizing
        new Histogram(1000, 3_600_000_000_000L, 2),  // lowestDiscernibleValue 1000
        new Histogram(1, 3_600_000_000_000L, 3),  // tagged "warmup"
        new Histogram(1, 3_600_000_000_000L, 3),  // empty
        new Histogram(5),                         // 5 digits, large counts
    };
    String[] tags = {null, null, null, "warmup", null, null};
    for (int i = 0; i < hs.length; ++i) {
      Histogram h = hs[i];
      if (i < 4) {
        for (int k = 0; k < 400; ++k) {
          long v = (long) Math.exp(r.nextDouble() * 21);  // 1 .. ~1.3e9
          h.recordValueWithCount(v, 1 + r.nextInt(3));
        }
        h.recordValue(0);
      } else if (i == 5) {
        h.recordValueWithCount(7, 3_000_000_000L);  // over 2^31 - 1
        h.recordValueWithCount(262_144, 5);
        h.recordValueWithCount(1_000_000_007L, 2);
      }
      h.setStartTimeStamp(startMs + 1000L * i);
      h.setEndTimeStamp(startMs + 1000L * i + 1000);
      if (tags[i] != null) h.setTag(tags[i]);
      w.outputIntervalHistogram(h);
      dump(tags[i], i * 1.0, 1.0, h);
    }
    w.close();

    HistogramLogWriter u = new HistogramLogWriter(new File(args[1]));
    u.outputComment("written by tests/unit/hlog/HlogFixture.java (HdrHistogram 2.1.11)");
    u.outputLogFormatVersion();
    u.outputStartTime(startMs);
    u.setBaseTime(startMs);
    u.outputBaseTime(startMs);
    u.outputLegend();
    for (int i = 0; i < 6; ++i) {
      Histogram h = new Histogram(1, 3_600_000_000_000L, 3);
      for (int k = 0; k < 3000; ++k) {
        h.recordValueWithCount((long) Math.exp(6 + r.nextGaussian() * 2.5), 1 + r.nextInt(5));
      }
      h.setStartTimeStamp(startMs + 1000L * i);
      h.setEndTimeStamp(startMs + 1000L * i + 1000);
      if (i == 0) h.setTag("warmup");
      u.outputIntervalHistogram(h);
    }
    u.close();
  }
}
