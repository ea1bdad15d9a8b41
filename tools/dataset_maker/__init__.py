"""The parts of tools/make_dataset.py, one concept a module.

common     errors, class names, the seed-sequence tags that keep streams apart
images     the regular images: sizes, synthesised or photo-cropped content, the
           encoding plan, JPEG encoding, one image rendered and written
formats    the other image formats: mixed-format folders, tar member extensions
hostile    files a loader must survive: hazard files, files that fail to decode,
           hostile tar shards
placement  the output folder: what may be replaced, written aside and renamed
           into place
folder     the ImageFolder layout (and its .tsv list), rendered by worker processes
shards     the WebDataset tar-shard layout
cli        the command line

tools/make_dataset.py puts this folder's parent on sys.path and re-exports the
Python API (make_dataset, make_shards, DatasetError, summary_line, main).
"""
